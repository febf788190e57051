import { type ChatSpecialTokens, DEFAULT_SPECIAL_TOKENS } from "../core/model-config.js";
import { DEFAULT_FINISH_RULES, type FinishRules } from "./loop-guard.js";
import { checkSpec, grammarSource, specKey, type GrammarSpec } from "./grammar-spec.js";
import { SchemaError, type SchemaLimits } from "./schema-check.js";
import { grammarTokenBytes, grammarVocab, grammarVocabType } from "./vocab.js";
import { loadXGrammar, type CompiledGrammar, type GrammarCompiler, type GrammarMatcher, type XGrammar } from "./xgrammar.js";

export interface GrammarOptions {
  /** Compiled grammars kept (least recently used ones are dropped). */
  cacheSize: number;
  /** A grammar that takes longer than this to compile is refused (and remembered as refused). */
  compileBudgetMs: number;
  limits?: SchemaLimits;
  /** The model's delimiters (its config's `special_tokens`); default `<think>`…, `<tool_call>`…. */
  tags?: ChatSpecialTokens;
  /** Bound integers and numbers to what JSON consumers can hold (number-bounds.ts); default on. */
  numberBounds?: boolean;
  /** The loop guard and length budgets of each reply (loop-guard.ts); they travel with the reply's rules. */
  finish?: FinishRules;
  /** Observes each compile's duration in seconds. */
  onCompile?: (seconds: number) => void;
}

export const DEFAULT_GRAMMAR_OPTIONS: GrammarOptions = {
  cacheSize: 64,
  compileBudgetMs: 5000,
  numberBounds: true,
  finish: DEFAULT_FINISH_RULES,
};

/**
 * The grammars of one model: XGrammar's TokenizerInfo and compiler for its vocabulary, and a
 * bounded LRU of compiled grammars, one per distinct spec (a client that sends the same schema
 * every time compiles it once). It runs on the grammar worker (grammar-worker.ts): a compile
 * takes 20 ms to seconds (bench/grammar.ts), once per distinct grammar.
 */
export class ModelGrammars {
  private readonly compiled = new Map<string, CompiledGrammar>();
  private readonly refused = new Map<string, string>();
  private pending = new Map<string, Promise<CompiledGrammar>>();

  private constructor(
    readonly xgrammar: XGrammar,
    private readonly compiler: GrammarCompiler,
    readonly vocabSize: number,
    readonly eosTokenId: number,
    /** Each token's bytes (utf8-state.ts keeps replies valid UTF-8 with them). */
    readonly tokenBytes: readonly Uint8Array[],
    private readonly options: GrammarOptions,
  ) {}

  static async create(tokenizerJson: unknown, vocabSize: number, eosTokenId: number, options: GrammarOptions): Promise<ModelGrammars> {
    const xgrammar = await loadXGrammar();
    const tags = options.tags ?? DEFAULT_SPECIAL_TOKENS;
    const textTags = [...tags.thinking, ...tags.toolCall];
    const vocab = grammarVocab(tokenizerJson, vocabSize, textTags);
    const type = grammarVocabType(tokenizerJson);
    const info = await xgrammar.TokenizerInfo.createTokenizerInfo(vocab, type, false, vocabSize, [eosTokenId]);
    const compiler = await xgrammar.GrammarCompiler.createGrammarCompiler(info, false);
    return new ModelGrammars(xgrammar, compiler, vocabSize, eosTokenId, grammarTokenBytes(vocab, textTags, type), options);
  }

  /**
   * The compiled grammar of `spec`; SchemaError when the spec cannot be enforced. `observe`
   * gets the compile's duration in seconds when this call compiled it (not a cached one).
   */
  async compile(spec: GrammarSpec, observe?: (seconds: number) => void): Promise<CompiledGrammar> {
    const key = specKey(spec);
    const hit = this.compiled.get(key);
    if (hit !== undefined) {
      this.compiled.delete(key);
      this.compiled.set(key, hit);
      return hit;
    }
    const refusal = this.refused.get(key);
    if (refusal !== undefined) throw new SchemaError(refusal);
    let job = this.pending.get(key);
    if (job === undefined) {
      job = this.compileNew(key, spec, observe).finally(() => this.pending.delete(key));
      this.pending.set(key, job);
    }
    return job;
  }

  /** A fresh matcher at the start of `compiled`; the end of turn is its stop token. */
  matcher(compiled: CompiledGrammar): Promise<GrammarMatcher> {
    return this.xgrammar.GrammarMatcher.createGrammarMatcher(compiled, [this.eosTokenId], false, -1);
  }

  /** Drops the compiled grammar of a spec by its key (specKey); its running matchers keep their own reference. */
  evict(key: string): void {
    this.compiled.get(key)?.dispose();
    this.compiled.delete(key);
  }

  /** The model's delimiters. */
  get tags(): ChatSpecialTokens {
    return this.options.tags ?? DEFAULT_SPECIAL_TOKENS;
  }

  get cached(): number {
    return this.compiled.size;
  }

  private async compileNew(key: string, spec: GrammarSpec, observe?: (seconds: number) => void): Promise<CompiledGrammar> {
    checkSpec(spec, this.options.limits);
    const started = performance.now();
    let compiled: CompiledGrammar;
    try {
      const source = await grammarSource(
        spec,
        (...args) => this.xgrammar.Testings._jsonSchemaToEBNF(...args),
        this.tags,
        this.options.numberBounds ?? true,
      );
      compiled =
        "ebnf" in source
          ? await this.compiler.compileGrammar(source.ebnf)
          : await this.compiler.compileStructuralTag(source.structuralTag as Record<string, unknown>);
    } catch (err) {
      // XGrammar reports what its converter cannot take by aborting the call (the module stays usable).
      const message = `the grammar engine refused the schema: ${err instanceof Error ? err.message : String(err)}`;
      this.remember(key, message);
      throw new SchemaError(message);
    }
    const ms = performance.now() - started;
    this.options.onCompile?.(ms / 1000);
    observe?.(ms / 1000);
    if (ms > this.options.compileBudgetMs) {
      compiled.dispose();
      const message = `the schema took ${Math.round(ms)} ms to compile into a grammar, over the budget of ${this.options.compileBudgetMs} ms (TESSERA_GRAMMAR_COMPILE_BUDGET_MS)`;
      this.remember(key, message);
      throw new SchemaError(message);
    }
    this.compiled.set(key, compiled);
    while (this.compiled.size > this.options.cacheSize) {
      const oldest = this.compiled.keys().next().value as string;
      // Matchers of running sequences hold their own reference to the grammar.
      this.compiled.get(oldest)!.dispose();
      this.compiled.delete(oldest);
    }
    return compiled;
  }

  private remember(key: string, message: string): void {
    this.refused.set(key, message);
    while (this.refused.size > this.options.cacheSize) this.refused.delete(this.refused.keys().next().value as string);
  }
}
