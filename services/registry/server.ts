import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { mountService, type ServiceMount } from "../../lib/service-mount.js";
import { createRegistryService, type RegistryDeps } from "./service.js";

/** The registry's mount (lib/service-mount.ts): its own port, the gateway's public port, the in-process transport, tests. */
export const registryRoutes = (deps: RegistryDeps): ServiceMount => mountService(RegistryService, createRegistryService(deps));
