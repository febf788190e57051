import { CONFIG_FILE_ENV } from "../config.js";
import { SECTIONS, type SectionName } from "../config-settings/index.js";
import type { Setting } from "../config-settings/setting.js";

// docs/configuration.md is generated from the settings table, as llama.cpp's llama-gen-docs
// writes its server README from `common_arg(...)`: the table is the only place a setting is
// described. `npm run docs:config` writes it; test/docs/configuration-docs.test.ts checks it.

const HEADER = `# Configuration

<!-- Generated from lib/config-settings/ by \`npm run docs:config\`; do not edit by hand. -->

Every setting is an environment variable; \`${CONFIG_FILE_ENV}\` may name a JSON file holding
any of them under the same names (the environment wins; relative paths in the file are
relative to the file). \`npx tessera serve --help\` prints the same table. Bad values stop the
start with a message naming every problem.

The settings come in sections, one per consumer; the process reads them once into
\`config.<section>.<key>\` and hands each consumer its section whole.

## Adding a setting

A new setting is one entry plus its consumer:

1. Add the entry (variable, default, help line, parser) to its section in
   \`lib/config-settings/<file>.ts\` (\`index.ts\` lists the sections); the type of
   \`config.<section>.<key>\` follows from its parser.
2. Read \`config.<section>.<key>\` where it is used. A section that is passed whole (the HTTP
   port's, the inference worker's limits and engine) reaches its consumer without further
   wiring when the key is named as the consumer's option.
3. Run \`npm run docs:config\` to regenerate this page.

Only the settings table reads \`TESSERA_\` variables (\`test/docs/settings-only-reader.test.ts\`
fails on any other reader); code that needs a setting before any configuration is handed down
reads it through its entry (\`readSetting\` in \`lib/config.ts\`). To set it from the Helm
chart, add it under a component's \`env:\` in \`deploy/helm/tessera/values.yaml\`:
\`test/deploy/helm-settings.test.ts\` checks that every variable the chart sets is in the table
and that every value the chart sets or renders is one its parser accepts.
`;

function cell(text: string): string {
  return text.replaceAll("|", "\\|").replaceAll("\n", " ");
}

function row(s: Setting<unknown>): string {
  const shown = s.documentedDefault ?? s.fallback;
  return `| \`${s.env}\` | ${shown === undefined || shown === "" ? "—" : `\`${cell(shown)}\``} | ${cell(s.help)} |`;
}

export function renderConfigurationDoc(): string {
  const table = (settings: readonly Setting<unknown>[]) => ["| Setting | Default | Meaning |", "| --- | --- | --- |", ...settings.map(row)];
  const sections = (Object.keys(SECTIONS) as SectionName[]).map((name) => {
    const { title, description, settings } = SECTIONS[name];
    return [`## ${title} (\`config.${name}\`)`, "", description, "", ...table(Object.values(settings) as Setting<unknown>[])].join("\n");
  });
  const file = [
    "## The settings file",
    "",
    ...table([
      {
        env: CONFIG_FILE_ENV,
        fallback: undefined,
        help: "JSON file with any of the settings below, keyed by the same names.",
        parse: String,
      },
    ]),
  ].join("\n");
  return `${HEADER}\n${file}\n\n${sections.join("\n\n")}\n`;
}
