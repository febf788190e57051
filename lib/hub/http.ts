import { PullError } from "./errors.js";
import type { HubEnv } from "./env.js";

// Every request of a pull goes through here: the token is sent to the Hub's host only (never
// to the CDN a file redirects to), redirects are followed one hop at a time, and each request
// and the body bytes it brings are counted (the tests and bench/pull.ts read the counts).

export interface HubRequest {
  method: string;
  url: string;
  status: number;
  range: string | undefined;
}

export class HubHttp {
  readonly requests: HubRequest[] = [];
  /** Body bytes received, every request together. */
  bytes = 0;
  private readonly hubHost: string;

  constructor(
    readonly env: HubEnv,
    private readonly signal?: AbortSignal,
  ) {
    this.hubHost = new URL(env.endpoint).host;
  }

  /** fetch, for @huggingface/hub's calls and ours: manual redirects, counted, token to the Hub only. */
  readonly fetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (this.env.offline) throw new PullError(`HF_HUB_OFFLINE is set: refusing a request to ${String(input)}`);
    let url = new URL(input instanceof Request ? input.url : String(input));
    const method = init.method ?? "GET";
    for (let hop = 0; hop < 6; hop++) {
      const headers = new Headers(init.headers);
      if (url.host === this.hubHost && this.env.token !== undefined && !headers.has("authorization"))
        headers.set("authorization", `Bearer ${this.env.token}`);
      if (url.host !== this.hubHost) headers.delete("authorization");
      const res = await fetch(url, { ...init, method, headers, redirect: "manual", signal: init.signal ?? this.signal ?? null });
      this.requests.push({ method, url: url.href, status: res.status, range: headers.get("range") ?? undefined });
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location !== null) {
        await res.body?.cancel();
        url = new URL(location, url);
        continue;
      }
      return this.counted(res);
    }
    throw new PullError(`${String(input)}: more than 5 redirects`);
  };

  private counted(res: Response): Response {
    if (res.body === null) return res;
    const counter = new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        this.bytes += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const out = new Response(res.body.pipeThrough(counter), { status: res.status, statusText: res.statusText, headers: res.headers });
    Object.defineProperty(out, "url", { value: res.url });
    return out;
  }
}
