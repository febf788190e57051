import type { Metrics } from "../../lib/metrics.js";
import type { Route } from "../route.js";

/** The result of one readiness check: true, or what is wrong. */
export type CheckResult = true | string;

export interface ReadinessCheck {
  name: string;
  check: () => Promise<CheckResult> | CheckResult;
}

/** GET /healthz: the process is alive and its event loop answers. */
export function healthzRoute(): Route {
  return {
    method: "GET",
    path: "/healthz",
    errorStyle: "detail",
    body: "none",
    logLevel: "debug",
    handle: () => ({ body: { status: "ok" } }),
  };
}

/** GET /readyz: 200 when every check passes (models loaded, store reachable), else 503 naming what is not. */
export function readyzRoute(checks: readonly ReadinessCheck[]): Route {
  return {
    method: "GET",
    path: "/readyz",
    errorStyle: "detail",
    body: "none",
    logLevel: "debug",
    async handle() {
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
    },
  };
}

/** GET /metrics: Prometheus text of this process's registry. */
export function metricsRoute(metrics: Metrics): Route {
  return {
    method: "GET",
    path: "/metrics",
    errorStyle: "detail",
    body: "none",
    logLevel: "debug",
    async handle(ctx) {
      const text = await metrics.render();
      ctx.res.writeHead(200, { "content-type": metrics.contentType, "content-length": Buffer.byteLength(text) });
      ctx.res.end(text);
      return undefined;
    },
  };
}
