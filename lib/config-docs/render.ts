import { CONFIG_FILE_ENV } from "../config.js";
import { SETTINGS } from "../config-settings.js";

// docs/configuration.md is generated from the settings table, as llama.cpp's llama-gen-docs
// writes its server README from `common_arg(...)`: the table is the only place a setting is
// described. `npm run docs:config` writes it; test/docs/configuration-docs.test.ts checks it.

const HEADER = `# Configuration

<!-- Generated from lib/config-settings.ts by \`npm run docs:config\`; do not edit by hand. -->

Every setting is an environment variable; \`${CONFIG_FILE_ENV}\` may name a JSON file holding
any of them under the same names (the environment wins; relative paths in the file are
relative to the file). \`npx tessera serve --help\` prints the same table. Bad values stop the
start with a message naming every problem.
`;

function cell(text: string): string {
  return text.replaceAll("|", "\\|").replaceAll("\n", " ");
}

export function renderConfigurationDoc(): string {
  const rows = [
    "| Setting | Default | Meaning |",
    "| --- | --- | --- |",
    `| \`${CONFIG_FILE_ENV}\` | — | JSON file with any of the settings below, keyed by the same names. |`,
    ...SETTINGS.map((s) => {
      const shown = s.documentedDefault ?? s.fallback;
      return `| \`${s.env}\` | ${shown === undefined || shown === "" ? "—" : `\`${cell(shown)}\``} | ${cell(s.help)} |`;
    }),
  ];
  return `${HEADER}\n${rows.join("\n")}\n`;
}
