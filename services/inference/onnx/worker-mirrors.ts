// Buffers a worker session keeps a copy of between runs (`mirror` in onnx-worker-session.ts): a
// lone reply's key/value store, fed whole every step. Lending it (a transfer each way) made V8
// collect garbage on both threads every step, for the 147 MB that arrived (1.7B, 640 slots: a
// mark-compact each side, 15-25 ms of the second core a step, slowing the forward beside it:
// bench/cpu-peer.md); a copy that stays on the worker is sent only the slots written since.
// `MirrorRegistry` is the main thread's record of the worker's copies; `MirrorCopies` the copies.

/**
 * Where a mirrored buffer changed: runs of `run` floats at float offsets `starts`, their floats
 * end to end in `data`. Both arrays fresh, each alone on its buffer: the run transfers them.
 */
export interface MirrorPatch {
  starts: Uint32Array;
  run: number;
  data: Float32Array;
}

/**
 * A buffer a worker session keeps a copy of, and its one writer. The writer appends and never
 * rewrites what it wrote (a cache's slots), so "what changed since" is a position: `changes(since)`
 * is what it wrote from position `since` on (from its start at 0) and the position it has reached;
 * no patch when that is more than `most` floats (the copy is then seeded with the whole buffer,
 * lent for the run: no fresh memory for a patch as large as the store). A buffer taken over by
 * another writer (a pooled store) comes with a new source object: the copy is then sent
 * everything the new writer wrote. Floats no writer wrote are never read (blocked slots), and
 * stay whatever the copy last held. `buffer` is the buffer now: one lent comes back as a new
 * ArrayBuffer object over the same memory.
 */
export interface MirrorSource {
  readonly buffer: ArrayBuffer;
  changes(since: number, most: number): { patch: MirrorPatch | undefined; upTo: number };
}

/**
 * One copy's update, carried by a run request before its feeds are read: a patch, or `seed`:
 * the buffer is lent with the run, and the copy takes every lent view of it.
 */
export interface MirrorUpdate {
  id: number;
  byteLength: number;
  patch?: MirrorPatch;
  seed?: true;
}

/** Patches larger than this share of their buffer are sent as a seed instead. */
const SEED_SHARE = 1 / 8;

/** A feed read from a copy: a view of it, as the main thread's feed is of the buffer. */
export interface MirrorView {
  id: number;
  byteOffset: number;
  length: number;
}

/** How many copies a worker keeps: a lone reply's store and the one before it (at most one is fed a step). */
export const MIRRORS_KEPT = 2;
/** How long copies are kept after the last run that read one. */
export const MIRRORS_IDLE_MS = 30_000;

interface Entry {
  id: number;
  buffer: WeakRef<ArrayBuffer>;
  source: MirrorSource;
  upTo: number;
}

/**
 * The main thread's record of one worker's copies: which buffers have one, under which id, and
 * up to where each writer's changes were sent. At most MIRRORS_KEPT, the least recently fed
 * dropped first; a buffer the main thread let go is dropped too. Drops go with the next request.
 */
export class MirrorRegistry {
  readonly #byBuffer = new WeakMap<ArrayBuffer, Entry>();
  /** Least recently fed first. */
  #order: Entry[] = [];
  #nextId = 1;
  #drops: number[] = [];

  /**
   * The copy of `source.buffer` to read, and the update that brings it up to date (none when
   * nothing changed). With a seed, the run must lend the buffer and call `lentBack` with the
   * buffer that comes back.
   */
  sync(source: MirrorSource): { id: number; update: MirrorUpdate | undefined } {
    let entry = this.#byBuffer.get(source.buffer);
    const fresh = entry === undefined;
    if (entry === undefined) {
      entry = { id: this.#nextId++, buffer: new WeakRef(source.buffer), source, upTo: 0 };
      this.#byBuffer.set(source.buffer, entry);
    } else {
      this.#order = this.#order.filter((e) => e !== entry);
      if (entry.source !== source) Object.assign(entry, { source, upTo: 0 });
    }
    this.#order.push(entry);
    const byteLength = source.buffer.byteLength;
    const { patch, upTo } = source.changes(entry.upTo, Math.floor((byteLength / Float32Array.BYTES_PER_ELEMENT) * SEED_SHARE));
    entry.upTo = upTo;
    this.#trim();
    if (patch === undefined) return { id: entry.id, update: { id: entry.id, byteLength, seed: true } };
    const update = fresh || patch.starts.length > 0 ? { id: entry.id, byteLength, patch } : undefined;
    return { id: entry.id, update };
  }

  /** A seeded buffer came back from the worker (a new ArrayBuffer object over the same memory): its copy is now found by it. */
  lentBack(id: number, buffer: ArrayBuffer): void {
    const entry = this.#order.find((e) => e.id === id);
    if (entry === undefined) return;
    const old = entry.buffer.deref();
    if (old !== undefined && this.#byBuffer.get(old) === entry) this.#byBuffer.delete(old);
    entry.buffer = new WeakRef(buffer);
    this.#byBuffer.set(buffer, entry);
  }

  /** Forgets the copies of `ids` (a run that failed may have left them half written): the next feed sends them afresh. */
  forget(ids: Iterable<number>): void {
    const gone = new Set(ids);
    for (const entry of this.#order.filter((e) => gone.has(e.id))) this.#drop(entry);
  }

  /** Forgets every copy, for a worker told to let all of them go (idle). */
  forgetAll(): void {
    for (const entry of [...this.#order]) this.#drop(entry);
    this.#drops = [];
  }

  /** The ids the worker is to drop, once: taken by the request that carries them. */
  takeDrops(): number[] {
    const drops = this.#drops;
    this.#drops = [];
    return drops;
  }

  get size(): number {
    return this.#order.length;
  }

  #trim(): void {
    for (const entry of this.#order.filter((e) => e.buffer.deref() === undefined)) this.#drop(entry);
    while (this.#order.length > MIRRORS_KEPT) this.#drop(this.#order[0]!);
  }

  #drop(entry: Entry): void {
    this.#order = this.#order.filter((e) => e !== entry);
    const buffer = entry.buffer.deref();
    if (buffer !== undefined && this.#byBuffer.get(buffer) === entry) this.#byBuffer.delete(buffer);
    this.#drops.push(entry.id);
  }
}

/**
 * The worker's copies, by id. A new copy is zeros; a dropped one is kept as a spare for the next
 * new copy of its size (fresh memory is paid for in page faults: bench/cpu-peer.md), until idle.
 */
export class MirrorCopies {
  readonly #copies = new Map<number, Float32Array>();
  #spare: ArrayBuffer | undefined;

  drop(ids: readonly number[]): void {
    for (const id of ids) {
      const copy = this.#copies.get(id);
      if (copy === undefined) continue;
      this.#copies.delete(id);
      this.#spare = copy.buffer as ArrayBuffer;
    }
  }

  /** Brings a copy up to date: a patch written, or a seed's copy made ready for `seed`. */
  apply({ id, byteLength, patch }: MirrorUpdate): void {
    let copy = this.#copies.get(id);
    if (copy === undefined) {
      const spare = this.#spare?.byteLength === byteLength ? this.#spare : undefined;
      if (spare !== undefined) this.#spare = undefined;
      copy = new Float32Array(spare ?? new ArrayBuffer(byteLength));
      this.#copies.set(id, copy);
    }
    if (copy.byteLength !== byteLength) throw new Error(`mirror ${id} is ${copy.byteLength} bytes, not ${byteLength}`);
    if (patch === undefined) return;
    const { starts, run, data } = patch;
    for (let i = 0; i < starts.length; i++) copy.set(data.subarray(i * run, (i + 1) * run), starts[i]!);
  }

  /** A seeded copy takes a lent view of its buffer, at the view's place. */
  seed(id: number, lent: Float32Array): void {
    const copy = this.#copies.get(id);
    if (copy === undefined) throw new Error(`mirror ${id} is not on this worker`);
    copy.set(lent, lent.byteOffset / Float32Array.BYTES_PER_ELEMENT);
  }

  view({ id, byteOffset, length }: MirrorView): Float32Array {
    const copy = this.#copies.get(id);
    if (copy === undefined) throw new Error(`mirror ${id} is not on this worker`);
    return new Float32Array(copy.buffer, byteOffset, length);
  }

  /** Idle: every copy and the spare let go. */
  clear(): void {
    this.#copies.clear();
    this.#spare = undefined;
  }
}
