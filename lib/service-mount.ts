// How a service is served: its mount (services/<name>/server.ts) registers one implementation
// on whatever serves it — a connect-node adapter (its own port, or the gateway's public one),
// Connect's router transport, or the in-process transport — in production, tests and benches alike.
import type { DescService } from "@bufbuild/protobuf";
import { createClient, createRouterTransport, type Client, type ServiceImpl, type Transport } from "@connectrpc/connect";
import { createInProcessTransport } from "./in-process-transport.js";

/** What implementations are registered on: a ConnectRouter or the in-process transport's registry. */
export interface ServiceRegistrar {
  service<T extends DescService>(service: T, implementation: Partial<ServiceImpl<T>>): unknown;
}

/** Registers a service's implementation, made once, so every router it is mounted on shares it. */
export type ServiceMount = (router: ServiceRegistrar) => void;

export function mountService<T extends DescService>(service: T, implementation: Partial<ServiceImpl<T>>): ServiceMount {
  return (router) => {
    router.service(service, implementation);
  };
}

export function mountAll(mounts: readonly ServiceMount[]): ServiceMount {
  return (router) => {
    for (const mount of mounts) mount(router);
  };
}

/**
 * How services in one process call each other: `in-process` hands messages over directly;
 * `router` goes through Connect's in-memory router transport, a full protocol round trip per
 * call (serialization included).
 */
export type InternalTransport = "in-process" | "router";

export function localTransport(mount: ServiceMount, kind: InternalTransport = "in-process"): Transport {
  return kind === "router" ? createRouterTransport(mount) : createInProcessTransport(mount);
}

/** A client of a service mounted in this process. */
export function localClient<T extends DescService>(service: T, mount: ServiceMount, kind: InternalTransport = "in-process"): Client<T> {
  return createClient(service, localTransport(mount, kind));
}
