import type { DescMessage, DescService } from "@bufbuild/protobuf";
import type { CallOptions, Client, HandlerContext, ServiceImpl } from "@connectrpc/connect";

type AnyMethod = (request: unknown, options?: CallOptions) => unknown;

/**
 * A service implementation that hands every call on to a client of the same service (the
 * gateway's public Connect mount in distributed mode, where the services live in other
 * processes). `clientFor` picks the client per request (inference: the model's worker).
 * Cancellation and the deadline travel with the call; headers do not.
 */
export function forwardingImpl<T extends DescService>(service: T, clientFor: (request: unknown) => Client<T>): ServiceImpl<T> {
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    const name = method.localName;
    const call = (request: DescMessage, ctx: HandlerContext) => {
      const client = clientFor(request) as unknown as Record<string, AnyMethod>;
      const timeoutMs = ctx.timeoutMs();
      return client[name]!(request, { signal: ctx.signal, ...(timeoutMs !== undefined && { timeoutMs }) });
    };
    switch (method.methodKind) {
      case "unary":
        impl[name] = call;
        break;
      case "server_streaming":
        impl[name] = async function* (request: DescMessage, ctx: HandlerContext) {
          yield* call(request, ctx) as AsyncIterable<unknown>;
        };
        break;
      default:
        // No service of ours streams requests; such a method is left unimplemented.
        break;
    }
  }
  return impl as ServiceImpl<T>;
}
