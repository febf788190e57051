// /readyz of every process (the gateway's route and the internal services' port): each
// condition checked at once, 200 when all pass, else 503 naming what is not.

/** The result of one readiness check: true, or what is wrong. */
export type CheckResult = true | string;

export interface ReadinessCheck {
  name: string;
  check: () => Promise<CheckResult> | CheckResult;
}

export interface Readiness {
  status: 200 | 503;
  body: { status: "ready" | "not ready"; checks: Record<string, string> };
}

export async function checkReadiness(checks: readonly ReadinessCheck[]): Promise<Readiness> {
  const results: Record<string, string> = {};
  let ready = true;
  await Promise.all(
    checks.map(async ({ name, check }) => {
      let result: CheckResult;
      try {
        result = await check();
      } catch (err) {
        result = (err as Error).message || "check failed";
      }
      results[name] = result === true ? "ok" : result;
      if (result !== true) ready = false;
    }),
  );
  return { status: ready ? 200 : 503, body: { status: ready ? "ready" : "not ready", checks: results } };
}
