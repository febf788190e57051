import type { DecodingDefaults } from "../../core/model-config.js";
import type { UnmaskPolicy } from "./policy.js";
import { buildPolicy, DEFAULT_POLICY, DEFAULT_THRESHOLD } from "./registry.js";

/** Where a model's unmasking policy can be named, most specific first. */
export interface PolicySources {
  /** The models config entry's `unmask_policy`. */
  catalog?: string | undefined;
  /** The server setting TESSERA_UNMASK_POLICY. */
  server?: string | undefined;
  /** The server setting TESSERA_UNMASK_THRESHOLD: `threshold`'s confidence where a spec gives none. */
  serverThreshold?: number | undefined;
  /** The model's own defaults (config.json `decoding`). */
  model: DecodingDefaults;
}

/**
 * The policy a model decodes with: the models config entry's, else the server setting's, else
 * the model's config.json `decoding.policy`, else the built-in default. A spec that does not
 * parse fails with the name of the place it came from.
 */
export function selectPolicy(sources: PolicySources): UnmaskPolicy {
  const [spec, where] =
    sources.catalog !== undefined
      ? [sources.catalog, "models config unmask_policy"]
      : sources.server !== undefined
        ? [sources.server, "TESSERA_UNMASK_POLICY"]
        : sources.model.policy !== undefined
          ? [sources.model.policy, "config.json decoding.policy"]
          : [DEFAULT_POLICY, "the default policy"];
  const defaults = {
    threshold: sources.serverThreshold ?? sources.model.threshold ?? DEFAULT_THRESHOLD,
    ...(sources.model.subBlockSize !== undefined ? { subBlockSize: sources.model.subBlockSize } : {}),
  };
  try {
    return buildPolicy(spec, defaults);
  } catch (err) {
    throw new Error(`${where} "${spec}": ${(err as Error).message}`);
  }
}
