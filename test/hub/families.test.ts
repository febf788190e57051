// lib/hub/families.ts CONVERTIBLE against the converter's table of record (convert/tessera_convert/
// families.py FAMILIES, printed by `python -m tessera_convert --families`): tessera pull refuses
// exactly the model_types the converter does not take, with the converter's names.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONVERTIBLE } from "../../lib/hub/families.js";
import { CONVERT_PYTHON, HAVE_CONVERT_VENV } from "../helpers/converted-models.js";
import { REPO_ROOT } from "../helpers/tessera.js";

interface PythonFamily {
  key: string;
  model_type: string;
  family: string;
  label: string;
}

describe.skipIf(!HAVE_CONVERT_VENV)("lib/hub/families.ts: the converter's families", () => {
  it("CONVERTIBLE is `python -m tessera_convert --families`, entry for entry and in its order", () => {
    const out = execFileSync(CONVERT_PYTHON, ["-m", "tessera_convert", "--families"], {
      cwd: join(REPO_ROOT, "convert"),
      encoding: "utf8",
    });
    const python = (JSON.parse(out) as PythonFamily[]).map(({ key, model_type, family, label }) => [
      key,
      { modelType: model_type, family, label },
    ]);
    expect(Object.entries(CONVERTIBLE)).toEqual(python);
  });
});
