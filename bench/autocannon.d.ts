// The part of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module "autocannon" {
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }
  export interface Result {
    url: string;
    duration: number;
    connections: number;
    requests: Histogram & { sent: number };
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    non2xx: number;
    "2xx": number;
    statusCodeStats?: Record<string, { count: number }>;
  }
  export interface RequestOptions {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    /** Called with every answer; `headers` as autocannon gives them (an object or a flat name/value list). */
    onResponse?: (status: number, body: string, context: Record<string, unknown>, headers: unknown) => void;
  }
  export interface Options {
    url: string;
    connections?: number;
    duration?: number;
    pipelining?: number;
    headers?: Record<string, string>;
    method?: string;
    /** Seconds before a request counts as timed out (default 10). */
    timeout?: number;
    requests?: RequestOptions[];
  }
  function autocannon(options: Options): Promise<Result>;
  export default autocannon;
}
