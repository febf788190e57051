import { useNats } from "../../test/nats/nats-server.js";
import { runStoreContract } from "../../test/helpers/store-contract.js";
import { createNatsStore } from "./kv-store.js";

const nats = useNats({ usageStream: false });
let run = 0;

// Every store gets buckets of its own (a fresh prefix), as the contract wants an empty store.
runStoreContract("nats", () => createNatsStore(nats.nc, { bucketPrefix: `t${++run}` }), { ttlClock: "real" });
