import type { Client } from "@connectrpc/connect";
import type { AccountingService } from "../gen/tessera/accounting/v1/accounting_pb.js";
import type { Logger } from "../lib/logger.js";

export interface FirstKeyDeps {
  accounting: Pick<Client<typeof AccountingService>, "ensureKey" | "listKeys" | "createKey">;
  /** TESSERA_BOOTSTRAP_KEY: this exact key must exist and be active; nothing is generated. */
  bootstrapKey: string | undefined;
  /** Where a generated key is printed, once. */
  out: NodeJS.WritableStream;
  logger: Logger;
}

/**
 * Makes sure someone can call the service: the bootstrap key when one is configured,
 * otherwise, when the store has no key at all, a new account with a new key whose secret is
 * printed once to `out` (only its hash is stored; the log names only its id). Returns the
 * generated secret, or undefined when none was generated.
 */
export async function ensureFirstKey({ accounting, bootstrapKey, out, logger }: FirstKeyDeps): Promise<string | undefined> {
  if (bootstrapKey !== undefined) {
    const ensured = await accounting.ensureKey({ apiKey: bootstrapKey, name: "bootstrap" });
    logger.info({ keyId: ensured.key?.keyId, created: ensured.created }, "bootstrap key is active");
    return undefined;
  }
  const { keys } = await accounting.listKeys({});
  if (keys.length > 0) return undefined;
  const created = await accounting.createKey({ name: "default" });
  out.write(
    [
      "",
      "Tessera created an API key on first start. It is shown only this once and stored only as a hash:",
      "",
      `    ${created.apiKey}`,
      "",
      "Send it as  Authorization: Bearer <key>.  More keys: tessera keys create --name NAME",
      "",
      "",
    ].join("\n"),
  );
  logger.info({ keyId: created.key?.keyId }, "created the first API key (printed once, not logged)");
  return created.apiKey;
}
