import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { mountService, type ServiceMount } from "../../lib/service-mount.js";
import { createInferenceService, type InferenceDeps } from "./service.js";

/** The inference service's mount (lib/service-mount.ts): its own port, the gateway's public port, the in-process transport, tests. */
export const inferenceRoutes = (deps: InferenceDeps): ServiceMount => mountService(InferenceService, createInferenceService(deps));
