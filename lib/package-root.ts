import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * The directory of Tessera's package.json, found upwards from `from` (a module's directory):
 * the same answer from the sources (`gateway/…`) and from the build (`dist/gateway/…`).
 */
export function packageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** Where `npm run build` writes the playground page (web/build.ts), and the gateway serves it from. */
export function playgroundDir(from: string): string {
  return join(packageRoot(from), "dist", "playground");
}
