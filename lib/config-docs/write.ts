import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { packageRoot } from "../package-root.js";
import { renderConfigurationDoc } from "./render.js";

const target = path.join(packageRoot(path.dirname(fileURLToPath(import.meta.url))), "docs", "configuration.md");
writeFileSync(target, renderConfigurationDoc());
process.stdout.write(`wrote ${path.relative(process.cwd(), target)}\n`);
