import { createRequire } from "node:module";
import type * as XGrammarModule from "@mlc-ai/web-xgrammar";

export type XGrammar = typeof XGrammarModule;
export type { CompiledGrammar, GrammarCompiler, GrammarMatcher, TokenizerInfo } from "@mlc-ai/web-xgrammar";

let loaded: Promise<XGrammar> | undefined;

/**
 * XGrammar's WASM build. The package is a UMD bundle written for browsers and CommonJS: under
 * Node's ESM loader it finds neither `exports` nor `define`, so it assigns `globalThis.xgrammar`,
 * and its Emscripten loader calls `require` and reads `__filename`, which ESM does not define.
 * Both are provided (only if absent) before the bundle is imported, once per process.
 */
export function loadXGrammar(): Promise<XGrammar> {
  loaded ??= (async () => {
    const require = createRequire(import.meta.url);
    const file = require.resolve("@mlc-ai/web-xgrammar");
    const g = globalThis as Record<string, unknown>;
    g.require ??= require;
    g.__filename ??= file;
    await import(file);
    const xgrammar = g.xgrammar as XGrammar | undefined;
    if (xgrammar === undefined || typeof xgrammar.GrammarCompiler !== "function") {
      throw new Error("@mlc-ai/web-xgrammar did not register globalThis.xgrammar");
    }
    return xgrammar;
  })();
  return loaded;
}
