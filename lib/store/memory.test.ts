import { runStoreContract } from "./contract.js";
import { createMemoryStore } from "./memory.js";

runStoreContract("memory", ({ clock }) => createMemoryStore({ clock }));
