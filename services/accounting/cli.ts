import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { AccountStatus, type AccountInfo, type AccountingService, type KeyInfo } from "../../gen/tessera/accounting/v1/accounting_pb.js";

export const KEYS_HELP = `Usage: tessera keys <command> [options]

Manage API keys, accounts, limits and usage.

Commands:
  create [--name N] [--rpm N] [--text-quota N] [--decision-quota N] [--account ID]
                     Issue a key (in a new account unless --account is given) and print
                     it once, alone on the last line. Quotas are tokens; 0 = unlimited.
                     --rpm 0 = the server's default requests per minute.
  list               List every key (never the secrets).
  revoke KEY_ID      Revoke a key; it fails authentication from then on.
  quota KEY_ID [--rpm N] [--text-quota N] [--decision-quota N]
                     Change a key's per-minute limit and its account's quotas; without
                     options, show them.
  disable ACCOUNT_ID      Disable an account (its keys get permission_error).
  enable ACCOUNT_ID       Make an account active again.
  unverify ACCOUNT_ID     Mark an account's e-mail address unverified.
  account ACCOUNT_ID      Show an account's status, quotas, usage and reservations.
  usage KEY_ID [--from YYYY-MM-DD] [--to YYYY-MM-DD]
                     A key's usage per UTC day.

Exit status: 0 success, 1 the request failed, 2 bad arguments.`;

type AccountingClient = Client<typeof AccountingService>;

class UsageError extends Error {}

interface Parsed {
  positional: string[];
  options: Map<string, string>;
}

function parse(args: string[], allowed: readonly string[]): Parsed {
  const positional: string[] = [];
  const options = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (!allowed.includes(name)) throw new UsageError(`unknown option --${name}`);
    let value: string | undefined;
    if (eq !== -1) value = arg.slice(eq + 1);
    else {
      value = args[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
    }
    if (options.has(name)) throw new UsageError(`--${name} given twice`);
    options.set(name, value);
  }
  return { positional, options };
}

function count(options: Map<string, string>, name: string, max: number): number | undefined {
  const raw = options.get(name);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) > max) throw new UsageError(`--${name} must be a whole number from 0 to ${max}`);
  return Number(raw);
}

const MAX_RPM = 0xffff_ffff;
const MAX_TOKENS = Number.MAX_SAFE_INTEGER;

function limitsFrom(options: Map<string, string>) {
  const rpm = count(options, "rpm", MAX_RPM);
  const text = count(options, "text-quota", MAX_TOKENS);
  const decision = count(options, "decision-quota", MAX_TOKENS);
  return {
    ...(rpm !== undefined && { requestsPerMinute: rpm }),
    ...(text !== undefined && { textQuotaTokens: BigInt(text) }),
    ...(decision !== undefined && { decisionQuotaTokens: BigInt(decision) }),
  };
}

function onePositional(parsed: Parsed, what: string): string {
  if (parsed.positional.length !== 1) throw new UsageError(`expected one ${what}`);
  return parsed.positional[0]!;
}

function none(parsed: Parsed): void {
  if (parsed.positional.length > 0) throw new UsageError(`unexpected argument ${parsed.positional[0]}`);
}

const STATUS_NAMES: Record<number, string> = {
  [AccountStatus.ACTIVE]: "active",
  [AccountStatus.DISABLED]: "disabled",
  [AccountStatus.EMAIL_UNVERIFIED]: "email_unverified",
};

const quotaText = (quota: bigint) => (quota === 0n ? "unlimited" : String(quota));

function describeKey(key: KeyInfo): string {
  return `key ${key.keyId}  account ${key.accountId}  name ${JSON.stringify(key.name)}  rpm ${key.requestsPerMinute}${key.revoked ? "  REVOKED" : ""}`;
}

function describeAccount(a: AccountInfo): string[] {
  return [
    `account ${a.accountId}  status ${STATUS_NAMES[a.status] ?? "unknown"}`,
    `  text tokens:     quota ${quotaText(a.textQuotaTokens)}  used ${a.textUsedTokens}  reserved ${a.textReservedTokens}`,
    `  decision tokens: quota ${quotaText(a.decisionQuotaTokens)}  used ${a.decisionUsedTokens}  reserved ${a.decisionReservedTokens}`,
  ];
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) =>
    r
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd(),
  );
}

/**
 * `tessera keys …`: argv is what follows `keys` (a leading "keys" is tolerated). Lines of
 * output go to `out`, complaints to `err` (default: `out`). Returns the exit status.
 */
export async function runKeysCommand(
  argv: string[],
  client: AccountingClient,
  out: (line: string) => void,
  err: (line: string) => void = out,
): Promise<number> {
  const args = argv[0] === "keys" ? argv.slice(1) : argv;
  const [command, ...rest] = args;
  if (command === undefined) {
    err(KEYS_HELP);
    return 2;
  }
  if (command === "--help" || command === "-h" || command === "help" || rest.includes("--help") || rest.includes("-h")) {
    out(KEYS_HELP);
    return 0;
  }
  try {
    switch (command) {
      case "create": {
        const parsed = parse(rest, ["name", "rpm", "text-quota", "decision-quota", "account"]);
        none(parsed);
        const res = await client.createKey({
          name: parsed.options.get("name") ?? "",
          accountId: parsed.options.get("account") ?? "",
          limits: limitsFrom(parsed.options),
        });
        out(`Created ${describeKey(res.key!)}`);
        out("Store the key now: it is not stored and cannot be shown again.");
        out(res.apiKey);
        return 0;
      }
      case "list": {
        none(parse(rest, []));
        const { keys } = await client.listKeys({});
        if (keys.length === 0) {
          out("No keys.");
          return 0;
        }
        const rows = [["KEY_ID", "ACCOUNT_ID", "NAME", "CREATED", "RPM", "STATE"]];
        for (const k of keys) {
          rows.push([
            k.keyId,
            k.accountId,
            k.name,
            new Date(Number(k.createdUnixMs)).toISOString(),
            String(k.requestsPerMinute),
            k.revoked ? "revoked" : "active",
          ]);
        }
        for (const line of table(rows)) out(line);
        return 0;
      }
      case "revoke": {
        const keyId = onePositional(parse(rest, []), "KEY_ID");
        const { key } = await client.revokeKey({ keyId });
        out(`Revoked ${describeKey(key!)}`);
        return 0;
      }
      case "quota": {
        const parsed = parse(rest, ["rpm", "text-quota", "decision-quota"]);
        const keyId = onePositional(parsed, "KEY_ID");
        const res = await client.setLimits({ keyId, limits: limitsFrom(parsed.options) });
        out(describeKey(res.key!));
        for (const line of describeAccount(res.account!)) out(line);
        return 0;
      }
      case "disable":
      case "enable":
      case "unverify": {
        const accountId = onePositional(parse(rest, []), "ACCOUNT_ID");
        const status =
          command === "disable" ? AccountStatus.DISABLED : command === "enable" ? AccountStatus.ACTIVE : AccountStatus.EMAIL_UNVERIFIED;
        const { account } = await client.setAccountStatus({ accountId, status });
        for (const line of describeAccount(account!)) out(line);
        return 0;
      }
      case "account": {
        const accountId = onePositional(parse(rest, []), "ACCOUNT_ID");
        const { account } = await client.getAccount({ accountId });
        for (const line of describeAccount(account!)) out(line);
        return 0;
      }
      case "usage": {
        const parsed = parse(rest, ["from", "to"]);
        const keyId = onePositional(parsed, "KEY_ID");
        const { days } = await client.getUsage({
          keyId,
          fromDay: parsed.options.get("from") ?? "",
          toDay: parsed.options.get("to") ?? "",
        });
        if (days.length === 0) {
          out("No usage.");
          return 0;
        }
        const rows = [["DAY", "REQUESTS", "PROMPT", "COMPLETION", "DECISION_INPUT"]];
        for (const d of days) {
          rows.push([d.day, String(d.requests), String(d.promptTokens), String(d.completionTokens), String(d.decisionInputTokens)]);
        }
        for (const line of table(rows)) out(line);
        return 0;
      }
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      err(`tessera keys: ${e.message}`);
      err("Run `tessera keys --help` for usage.");
      return 2;
    }
    if (e instanceof ConnectError) {
      err(`tessera keys: ${e.rawMessage}`);
      return e.code === Code.InvalidArgument ? 2 : 1;
    }
    throw e;
  }
}
