import type { ConnectRouter } from "@connectrpc/connect";
import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { createInferenceService, type InferenceDeps } from "./service.js";

/** Mounts the inference service on a Connect router (embedded router transport or an HTTP server). */
export const inferenceRoutes = (deps: InferenceDeps) => (router: ConnectRouter) =>
  router.service(InferenceService, createInferenceService(deps));
