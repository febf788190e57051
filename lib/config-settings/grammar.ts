import { integer, onOff } from "../config-parsers.js";
import { section } from "./setting.js";

// Constrained decoding (services/inference/grammar).

export const grammar = section(
  "Grammar",
  "Constrained decoding: compiled grammars, their budgets and guards (docs/constrained-decoding.md).",
  {
    cacheSize: {
      env: "TESSERA_GRAMMAR_CACHE",
      fallback: "64",
      help: "Compiled grammars (JSON schemas, tool sets) kept per grammar thread of a model; the least recently used are dropped.",
      parse: integer(1, 100_000),
    },
    compileBudgetMs: {
      env: "TESSERA_GRAMMAR_COMPILE_BUDGET_MS",
      fallback: "5000",
      help: "A JSON schema or tool set whose grammar takes longer than this to compile is refused (400) and remembered as refused.",
      parse: integer(1, 600_000),
    },
    workers: {
      env: "TESSERA_GRAMMAR_WORKERS",
      fallback: "6",
      help: "Grammar compile threads per model: compiles run in parallel on threads that serve no reply; a grammar's replies run on the thread that compiled it.",
      parse: integer(1, 64),
    },
    numberBounds: {
      env: "TESSERA_GRAMMAR_NUMBER_BOUNDS",
      fallback: "on",
      help: "Bound integers to ±(2^53 − 1) and numbers to 16 integer, 15 fraction and 2 exponent digits where a schema gives no bounds (docs/constrained-decoding.md).",
      parse: onOff,
    },
    loopRepeats: {
      env: "TESSERA_GRAMMAR_LOOP_REPEATS",
      fallback: "4",
      help: "Loop guard of constrained values: a unit of 1–8 tokens repeated this many times (over 8 tokens at least) has its next repeat masked; 0: off.",
      parse: integer(0, 1000),
    },
    stringBudget: {
      env: "TESSERA_GRAMMAR_STRING_BUDGET",
      fallback: "256",
      help: "Tokens of a JSON string after which closing it is progressively favoured; 0: no budget.",
      parse: integer(0, 1_000_000),
    },
    itemBudget: {
      env: "TESSERA_GRAMMAR_ITEM_BUDGET",
      fallback: "64",
      help: "Items of a JSON array or object after which closing it is progressively favoured; 0: no budget.",
      parse: integer(0, 1_000_000),
    },
    replyBudget: {
      env: "TESSERA_GRAMMAR_REPLY_BUDGET",
      fallback: "on",
      help: "Close every open JSON value of a constrained reply before its max_tokens (favoured over the last quarter, forced within the reserve); off: none.",
      parse: onOff,
    },
    freeText: {
      env: "TESSERA_GRAMMAR_FREE_TEXT_GUARD",
      fallback: "off",
      help: "Apply the loop guard to the free text of an auto-tools reply too (it changes answers, so off by default).",
      parse: onOff,
    },
  },
);
