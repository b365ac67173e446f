/**
 * The two products of one-row attention (q·k over a cache, then the weighted sum of its values) as
 * WebAssembly SIMD (f32x4), for decode steps and short prompts. The JS loops they replace ran at
 * ~1.4 GFLOP/s and took ~30 % of a decode step at 16–64 streams on the 101M model (bench/decode-profile.ts);
 * TF.js has no kernel for attention over ragged caches, and a batched product per sequence costs
 * more in dispatch than it computes. The module is small enough to write out here instead of
 * shipping a toolchain: two functions, emitted as bytes by the helpers below (the binary format's
 * opcodes, https://webassembly.github.io/spec/core/binary/). A cache is copied into the module's
 * memory per sequence and layer (a memcpy, ~10 % of the kernel's time), so KVCache stays plain JS
 * memory that goes back to the system when freed. Products accumulate in float32 (as the weight
 * products do); the softmax between them runs in JS in float64.
 */

/** [kernel params] for both functions: pointers in bytes, the rest counts. */
const PARAMS = ['a', 'b', 'c', 'S', 'H', 'g', 'W', 'D'] as const
type Param = (typeof PARAMS)[number]

const uleb = (n: number): number[] => {
  const out: number[] = []
  do {
    let b = n & 0x7f
    n >>>= 7
    if (n) b |= 0x80
    out.push(b)
  } while (n)
  return out
}
const sleb = (n: number): number[] => {
  const out: number[] = []
  for (;;) {
    const b = n & 0x7f
    n >>= 7
    if ((n === 0 && !(b & 0x40)) || (n === -1 && b & 0x40)) return [...out, b]
    out.push(b | 0x80)
  }
}
const str = (s: string): number[] => [...uleb(s.length), ...Buffer.from(s)]
const vec = (items: number[][]): number[] => [...uleb(items.length), ...items.flat()]
const section = (id: number, body: number[]): number[] => [id, ...uleb(body.length), ...body]

const I32 = 0x7f
const V128 = 0x7b
/** Instructions (the subset the kernels use). */
const I = {
  get: (x: number) => [0x20, ...uleb(x)],
  set: (x: number) => [0x21, ...uleb(x)],
  const: (n: number) => [0x41, ...sleb(n)],
  add: [0x6a],
  sub: [0x6b],
  mul: [0x6c],
  divU: [0x6e],
  ltU: [0x49],
  loop: [0x03, 0x40],
  end: [0x0b],
  brIf: (depth: number) => [0x0d, ...uleb(depth)],
  f32load: (offset = 0) => [0x2a, 2, ...uleb(offset)],
  f32store: [0x38, 2, 0],
  f32add: [0x92],
  simd: (op: number, ...imm: number[]) => [0xfd, ...uleb(op), ...imm],
}
const v128load = (offset: number) => I.simd(0, 4, ...uleb(offset))
const v128store = (offset: number) => I.simd(11, 4, ...uleb(offset))
const zero = I.simd(12, ...new Array(16).fill(0))
const splat = I.simd(19)
const lane = (i: number) => I.simd(31, i)
const fadd4 = I.simd(228)
const fmul4 = I.simd(230)

/**
 * A function body's locals after its parameters (i32s, then v128s, by name; D4 and W4 added), their
 * get and set, and the prologue both kernels share: D4 = 4 D and W4 = 4 W (row sizes in bytes).
 */
function locals(i32: string[], v128: string[]) {
  const at = new Map<string, number>(PARAMS.map((p, i) => [p, i]))
  const names = [...i32, 'D4', 'W4']
  for (const n of [...names, ...v128]) at.set(n, at.size)
  const ix = (n: Param | string) => at.get(n)!
  const decl = vec([
    [...uleb(names.length), I32],
    [...uleb(v128.length), V128],
  ])
  const g = (n: string) => I.get(ix(n))
  const s = (n: string) => I.set(ix(n))
  const prologue = [...g('D'), ...I.const(4), ...I.mul, ...s('D4'), ...g('W'), ...I.const(4), ...I.mul, ...s('W4')]
  return { ix, g, s, prologue: [...decl, ...prologue] }
}

/** `x = x + y` on i32 locals, y a local or a constant. */
const inc = (ix: (n: string) => number, x: string, y: string | number) => [
  ...I.get(ix(x)),
  ...(typeof y === 'number' ? I.const(y) : I.get(ix(y))),
  ...I.add,
  ...I.set(ix(x)),
]
/** The four f32x4 accumulators a0..a3 set to zero. */
const clear = (ix: (n: string) => number) => [0, 1, 2, 3].flatMap((i) => [...zero, ...I.set(ix(`a${i}`))])
/** `a_i += x_i * y_i` for the four 16-byte lanes at pointers x and y (or a splat weight w for y). */
const fma4 = (ix: (n: string) => number, x: string, y: string, splatY: boolean) =>
  [0, 1, 2, 3].flatMap((i) => [
    ...I.get(ix(`a${i}`)),
    ...I.get(ix(x)),
    ...v128load(16 * i),
    ...(splatY ? I.get(ix(y)) : [...I.get(ix(y)), ...v128load(16 * i)]),
    ...fmul4,
    ...fadd4,
    ...I.set(ix(`a${i}`)),
  ])

/**
 * scores(q, k, p, S, H, g, W, D): for each query head h of q ([H, D]) and position s < S of k (rows of
 * W floats, head h's keys at (h / g) × D), p[h × S + s] = q_h · k_s. S ≥ 1, D a multiple of 16.
 */
function scoresBody(): number[] {
  const { ix, g, s, prologue } = locals(['h', 's', 'e', 'qh', 'kr', 'pr'], ['a0', 'a1', 'a2', 'a3'])
  // One instruction group a line, as a listing reads.
  // prettier-ignore
  const body = [
    ...I.loop, // h
    ...g('a'), ...g('h'), ...g('D4'), ...I.mul, ...I.add, ...s('qh'),
    ...g('b'), ...g('h'), ...g('g'), ...I.divU, ...g('D4'), ...I.mul, ...I.add, ...s('kr'),
    ...g('c'), ...g('h'), ...g('S'), ...I.mul, ...I.const(4), ...I.mul, ...I.add, ...s('pr'),
    ...I.const(0), ...s('s'),
    ...I.loop, // s
    ...clear(ix),
    ...I.const(0), ...s('e'),
    ...I.loop, // e: 16 floats a turn
    ...fma4(ix, 'qh', 'kr', false),
    ...inc(ix, 'qh', 64), ...inc(ix, 'kr', 64), ...inc(ix, 'e', 64),
    ...g('e'), ...g('D4'), ...I.ltU, ...I.brIf(0),
    ...I.end,
    // Back to the head's start, on to the next position's row.
    ...g('qh'), ...g('D4'), ...I.sub, ...s('qh'),
    ...g('kr'), ...g('D4'), ...I.sub, ...g('W4'), ...I.add, ...s('kr'),
    ...g('pr'),
    ...g('a0'), ...g('a1'), ...fadd4, ...g('a2'), ...g('a3'), ...fadd4, ...fadd4, ...s('a0'),
    ...g('a0'), ...lane(0), ...g('a0'), ...lane(1), ...I.f32add, ...g('a0'), ...lane(2), ...g('a0'), ...lane(3), ...I.f32add, ...I.f32add,
    ...I.f32store,
    ...inc(ix, 'pr', 4), ...inc(ix, 's', 1),
    ...g('s'), ...g('S'), ...I.ltU, ...I.brIf(0),
    ...I.end,
    ...inc(ix, 'h', 1),
    ...g('h'), ...g('H'), ...I.ltU, ...I.brIf(0),
    ...I.end,
  ]
  return [...prologue, ...body, ...I.end]
}

/**
 * weighted(p, v, out, S, H, g, W, D): for each query head h, out[h × D ...] = Σ_s p[h × S + s] · v_s
 * (v's rows of W floats, head h's values at (h / g) × D). S ≥ 1, D a multiple of 16.
 */
function weightedBody(): number[] {
  const { ix, g, s, prologue } = locals(['h', 'e', 'vb', 'vr', 'pp', 'pend', 'or'], ['a0', 'a1', 'a2', 'a3', 'w'])
  // One instruction group a line, as a listing reads.
  // prettier-ignore
  const body = [
    ...I.loop, // h
    ...g('b'), ...g('h'), ...g('g'), ...I.divU, ...g('D4'), ...I.mul, ...I.add, ...s('vb'),
    ...g('c'), ...g('h'), ...g('D4'), ...I.mul, ...I.add, ...s('or'),
    ...I.const(0), ...s('e'),
    ...I.loop, // e: 16 floats a turn
    ...clear(ix),
    ...g('vb'), ...g('e'), ...I.add, ...s('vr'),
    ...g('a'), ...g('h'), ...g('S'), ...I.mul, ...I.const(4), ...I.mul, ...I.add, ...s('pp'),
    ...g('pp'), ...g('S'), ...I.const(4), ...I.mul, ...I.add, ...s('pend'),
    ...I.loop, // s
    ...g('pp'), ...I.f32load(), ...splat, ...s('w'),
    ...fma4(ix, 'vr', 'w', true),
    ...inc(ix, 'vr', 'W4'), ...inc(ix, 'pp', 4),
    ...g('pp'), ...g('pend'), ...I.ltU, ...I.brIf(0),
    ...I.end,
    ...[0, 1, 2, 3].flatMap((i) => [...g('or'), ...g(`a${i}`), ...v128store(16 * i)]),
    ...inc(ix, 'or', 64), ...inc(ix, 'e', 64),
    ...g('e'), ...g('D4'), ...I.ltU, ...I.brIf(0),
    ...I.end,
    ...inc(ix, 'h', 1),
    ...g('h'), ...g('H'), ...I.ltU, ...I.brIf(0),
    ...I.end,
  ]
  return [...prologue, ...body, ...I.end]
}

/** The module's bytes: one memory ("mem") and the two functions. */
export function attentionModuleBytes(): Uint8Array {
  const type = [0x60, ...vec(PARAMS.map(() => [I32])), ...vec([])]
  const code = (b: number[]) => [...uleb(b.length), ...b]
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, vec([type])),
    ...section(3, vec([[0], [0]])),
    ...section(5, vec([[0x00, 1]])),
    ...section(
      7,
      vec([
        [...str('mem'), 2, 0],
        [...str('scores'), 0, 0],
        [...str('weighted'), 0, 1],
      ]),
    ),
    ...section(10, vec([code(scoresBody()), code(weightedBody())])),
  ])
}

type Kernel = (a: number, b: number, c: number, S: number, H: number, g: number, W: number, D: number) => void

/** The part of the WebAssembly API used here (the compiler's libraries here do not declare it). */
interface WasmMemory {
  buffer: ArrayBuffer
  grow(pages: number): number
}
interface WasmApi {
  validate(bytes: Uint8Array): boolean
  Module: new (bytes: Uint8Array) => object
  Instance: new (module: object) => { exports: Record<string, unknown> }
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly

/** The instantiated module of this thread, with a view of its memory grown to the size asked. */
export class AttentionKernels {
  readonly scores: Kernel
  readonly weighted: Kernel
  private readonly memory: WasmMemory
  f32: Float32Array

  private constructor(exports: Record<string, unknown>) {
    const e = exports as { mem: WasmMemory; scores: Kernel; weighted: Kernel }
    this.memory = e.mem
    this.scores = e.scores
    this.weighted = e.weighted
    this.f32 = new Float32Array(this.memory.buffer)
  }

  /** Room for `floats` float32 values from offset 0. */
  reserve(floats: number): Float32Array {
    const bytes = floats * 4
    if (bytes > this.memory.buffer.byteLength) {
      this.memory.grow(Math.ceil((bytes - this.memory.buffer.byteLength) / 65536))
      this.f32 = new Float32Array(this.memory.buffer)
    }
    return this.f32
  }

  private static made: AttentionKernels | null | undefined
  /** This thread's kernels; null where the runtime has no WebAssembly SIMD (attention.ts then runs its JS loops). */
  static get(): AttentionKernels | null {
    if (AttentionKernels.made !== undefined) return AttentionKernels.made
    try {
      const bytes = attentionModuleBytes()
      AttentionKernels.made = wasm.validate(bytes) ? new AttentionKernels(new wasm.Instance(new wasm.Module(bytes)).exports) : null
    } catch {
      AttentionKernels.made = null
    }
    return AttentionKernels.made
  }
}
