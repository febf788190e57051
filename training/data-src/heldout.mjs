// Words held out of every training task of model v2 (prepare-data.mjs skips them too): the
// copy evaluation asks about them, so a reply that names them copied them from the prompt.
import { inSplit } from "./rng.mjs";

export const isHeldOutWord = (w) => inSplit(`word:${w}`, 0.01, "v2-heldout");
/** AFINN words and code words kept out of training option names. */
export const isHeldOutName = (w) => inSplit(`name:${w}`, 0.15, "v2-heldout");
