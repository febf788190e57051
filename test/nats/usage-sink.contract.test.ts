import { create } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AccountingService, SettleRequestSchema, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { createInProcessTransport } from "../../lib/in-process-transport.js";
import { silentLogger } from "../../lib/logger.js";
import { natsUsageSink, startUsageConsumer } from "../../lib/nats/usage-stream.js";
import { createMemoryStore, type Store } from "../../lib/store/index.js";
import { directUsageSink, type UsageSink } from "../../lib/usage/sink.js";
import { createAccountingService } from "../../services/accounting/service.js";
import { useNats } from "./nats-server.js";

const nats = useNats({ usageStream: true });

interface SinkUnderTest {
  sink: UsageSink;
  close(): Promise<void>;
}

/**
 * The gateway hands usage to a sink; accounting's ledger must end up exact whichever sink it
 * is: the embedded one (Settle directly) or NATS (a JetStream stream, deduplicated by request
 * id, consumed with explicit acks).
 */
function runUsageSinkContract(name: string, make: (accounting: Client<typeof AccountingService>) => SinkUnderTest) {
  describe(`UsageSink contract: ${name}`, () => {
    let store: Store;
    let accounting: Client<typeof AccountingService>;
    let subject: SinkUnderTest;
    let keyId: string;
    let accountId: string;

    beforeEach(async () => {
      store = createMemoryStore();
      const service = createAccountingService({ store, logger: silentLogger(), defaultRequestsPerMinute: 1000 });
      accounting = createClient(
        AccountingService,
        createInProcessTransport((r) => r.service(AccountingService, service)),
      );
      const created = await accounting.createKey({ name: "sink", limits: { textQuotaTokens: 10_000n } });
      keyId = created.key!.keyId;
      accountId = created.key!.accountId;
      subject = make(accounting);
    });
    afterEach(async () => {
      await subject.close();
      await store.close();
    });

    const settle = (requestId: string, prompt: number, completion: number) =>
      create(SettleRequestSchema, {
        keyId,
        requestId,
        kind: UsageKind.TEXT,
        usage: { promptTokens: BigInt(prompt), completionTokens: BigInt(completion) },
      });

    async function ledgerWhen(requests: number) {
      const end = Date.now() + 5_000;
      for (;;) {
        const { days } = await accounting.getUsage({ keyId });
        const total = days.reduce((sum, d) => sum + Number(d.requests), 0);
        if (total >= requests || Date.now() > end) return days;
        await new Promise((r) => setTimeout(r, 20));
      }
    }

    it("charges each request once, exactly, even when its usage is handed over twice", async () => {
      await subject.sink.publish(settle("req-1", 10, 5));
      await subject.sink.publish(settle("req-1", 10, 5));
      await subject.sink.publish(settle("req-2", 3, 0));
      const days = await ledgerWhen(2);
      await new Promise((r) => setTimeout(r, 200));
      const again = (await accounting.getUsage({ keyId })).days;
      expect(again).toEqual(days);
      expect(days).toHaveLength(1);
      expect(days[0]).toMatchObject({ requests: 2n, promptTokens: 13n, completionTokens: 5n });
      const { account } = await accounting.getAccount({ accountId });
      expect(account?.textUsedTokens).toBe(18n);
    });
  });
}

runUsageSinkContract("direct (embedded)", (accounting) => ({ sink: directUsageSink(accounting), close: async () => undefined }));

runUsageSinkContract("NATS stream + accounting's consumer", (accounting) => {
  const consumer = startUsageConsumer(nats.nc, async (event) => void (await accounting.settle(event)), silentLogger());
  return { sink: natsUsageSink(nats.nc), close: () => consumer.stop() };
});
