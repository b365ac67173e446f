/**
 * Loads @mlc-ai/web-xgrammar (xgrammar compiled to WebAssembly). Its file is a UMD bundle although
 * its package.json says `"type": "module"`, so `import` fails ("require is not defined"); the same
 * text is compiled here as a CommonJS module instead, at run time, so nothing is copied at install.
 *
 * Each call makes a fresh instance with its own WebAssembly memory. That matters: a grammar the
 * library rejects ends in an Emscripten abort, which leaves the instance's stack pointer where the
 * failed call left it; after a few dozen such failures the instance corrupts its own memory. The
 * caller retires an instance after a few failures (grammars.ts) and loads a new one.
 */
import fs from 'node:fs'
import Module, { createRequire } from 'node:module'
import path from 'node:path'
import type * as XG from '@mlc-ai/web-xgrammar'

export type XGrammar = typeof XG

interface CjsModule {
  filename: string
  paths: string[]
  exports: unknown
  _compile(text: string, filename: string): void
}
type ModuleCtor = (new (id: string) => CjsModule) & { _nodeModulePaths(dir: string): string[] }

let source: { file: string; text: string } | null = null

/** What the library printed to stderr, per instance: the reason of the last failure is read from it. */
export interface ErrorSink {
  lines: string[]
}

/**
 * A new xgrammar instance and the sink its error output goes to. Emscripten binds `console.error`
 * when the instance starts (on the first call that needs it), so the first call must run through
 * `start`, which routes the binding into the sink.
 */
export function loadXGrammar(): { xg: XGrammar; sink: ErrorSink; start<T>(first: () => Promise<T>): Promise<T> } {
  if (!source) {
    const require = createRequire(import.meta.url)
    const file = require.resolve('@mlc-ai/web-xgrammar')
    source = { file, text: fs.readFileSync(file, 'utf8') }
  }
  const M = Module as unknown as ModuleCtor
  const m = new M(source.file)
  m.filename = source.file
  m.paths = M._nodeModulePaths(path.dirname(source.file))
  m._compile(source.text, source.file)
  const xg = m.exports as XGrammar
  const sink: ErrorSink = { lines: [] }
  const start = async <T>(first: () => Promise<T>): Promise<T> => {
    const original = console.error
    console.error = (...args: unknown[]) => {
      sink.lines.push(args.map(String).join(' '))
      if (sink.lines.length > 50) sink.lines.splice(0, sink.lines.length - 50)
    }
    try {
      return await first()
    } finally {
      console.error = original
    }
  }
  return { xg, sink, start }
}
