import type { ConnectRouter } from "@connectrpc/connect";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { createRegistryService, type RegistryDeps } from "./service.js";

/** Mounts the registry on a Connect router (embedded router transport or an HTTP server). */
export const registryRoutes = (deps: RegistryDeps) => (router: ConnectRouter) =>
  router.service(RegistryService, createRegistryService(deps));
