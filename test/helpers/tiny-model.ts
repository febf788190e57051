import path from "node:path";
import { fileURLToPath } from "node:url";

/** The tiny test model's directory (test/fixtures/tiny-model), for tests and benchmarks. */
export const TINY_MODEL_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/tiny-model");
