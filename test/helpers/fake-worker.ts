import { createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";

export interface FakeWorker {
  /** http://127.0.0.1:port, the address to announce in a heartbeat. */
  url: string;
  close(): Promise<void>;
}

/**
 * An inference worker in another "process" (its own h2c Connect server), with whatever
 * behaviour a test gives it: how the gateway reaches remote workers, and a way to make a
 * worker refuse (Overloaded) or fail on demand.
 */
export async function startFakeInferenceWorker(impl: Partial<ServiceImpl<typeof InferenceService>>): Promise<FakeWorker> {
  const server = createServer(connectNodeAdapter({ routes: (router) => router.service(InferenceService, impl) }));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Sessions the gateway keeps open would hold close() forever.
        setTimeout(resolve, 200).unref();
      }),
  };
}
