import t from 'tap'
import { ConfigError, loadConfig, parseFlags, sizeBytes } from '../src/core/config.js'

t.test('inference settings: repeatable --model, defaults, validation', async (t) => {
  const { flags } = parseFlags([
    'serve',
    '--model',
    '/m/a',
    '--model=/m/b',
    '--served-model-name',
    'a',
    '--served-model-name',
    'b',
    '--port',
    '1',
    '--port',
    '2',
  ])
  t.equal(flags.model, '/m/a,/m/b', '--model gathers')
  t.equal(flags['served-model-name'], 'a,b')
  t.equal(flags.port, '2', 'other flags: the last wins')
  const c = loadConfig(flags, {})
  t.same(c.models, ['/m/a', '/m/b'])
  t.same(c.servedModelNames, ['a', 'b'])
  const d = loadConfig({}, {})
  t.same(d.models, [], 'no --model: the built-in tiny model')
  t.equal(d.schedulingPolicy, 'fcfs')
  t.equal(d.inferenceBackend, 'auto')
  t.same(loadConfig({}, { WEFT_MODEL: 'none' }).models, ['none'], 'WEFT_MODEL=none: no inference')
  const fails = (flags: Record<string, string>, message: RegExp) => {
    const e = (() => {
      try {
        loadConfig(flags, {})
      } catch (err) {
        return err
      }
    })()
    t.type(e, ConfigError)
    t.match((e as Error).message, message)
  }
  fails({ 'scheduling-policy': 'lifo' }, /scheduling-policy must be one of fcfs, priority/)
  fails({ 'inference-backend': 'gpu' }, /inference-backend must be one of/)
  fails({ 'max-num-seqs': '0' }, /max-num-seqs must be an integer/)
})

t.test('boolean switches: --geo-preload and --no-enable-prefix-caching', async (t) => {
  t.equal(loadConfig({}, {}).geoPreload, true, 'geo ranges parsed at start by default')
  t.equal(loadConfig({}, { WEFT_GEO_PRELOAD: 'false' }).geoPreload, false)
  t.equal(loadConfig(parseFlags(['serve', '--geo-preload', 'false']).flags, { WEFT_GEO_PRELOAD: 'true' }).geoPreload, false, 'flag wins')
  t.equal(loadConfig({}, {}).enablePrefixCaching, true, 'prefix caching on by default, as vLLM')
  t.equal(loadConfig(parseFlags(['serve', '--no-enable-prefix-caching']).flags, {}).enablePrefixCaching, false, 'a bare flag turns it off')
  t.throws(() => loadConfig({ 'geo-preload': 'maybe' }, {}), /geo-preload must be a boolean/)
})

t.test('sizes as operators and DuckDB write them', async (t) => {
  // DuckDB reports its limit rounded for people, with a space and decimals; /admin/stats reads it back in bytes.
  t.equal(sizeBytes('192.0 MiB'), 192 * 1024 * 1024)
  t.equal(sizeBytes('1.5 GB'), 1_500_000_000)
  t.equal(sizeBytes('4GiB'), 4 * 1024 ** 3)
  t.equal(sizeBytes('12 bytes'), 12)
  t.equal(sizeBytes('4096'), 4096)
  t.ok(Number.isNaN(sizeBytes('lots')))
  t.ok(Number.isNaN(sizeBytes('3 parsecs')))
})

t.test('--inference-threads / WEFT_INFERENCE_THREADS: wasm threads per inference worker', async (t) => {
  t.equal(loadConfig({}, {}).inferenceThreads, 1, 'the default: the single-threaded build')
  t.equal(loadConfig({}, { WEFT_INFERENCE_THREADS: '1' }).inferenceThreads, 1, 'from the environment')
  t.equal(
    loadConfig(parseFlags(['serve', '--inference-threads', '4']).flags, { WEFT_INFERENCE_THREADS: '1' }).inferenceThreads,
    4,
    'flag wins',
  )
  for (const bad of ['0', '9', '1.5', 'two'])
    t.throws(() => loadConfig({ 'inference-threads': bad }, {}), /inference-threads must be an integer in \[1, 8\]/, bad)
})

t.test('--clickhouse-insert-settings / WEFT_CLICKHOUSE_INSERT_SETTINGS: settings for every insert', async (t) => {
  t.same(loadConfig({}, {}).storage.clickhouseInsertSettings, {}, 'none by default')
  t.same(
    loadConfig({ storage: 'chdb', 'clickhouse-insert-settings': 'insert_quorum=2, insert_quorum_parallel=0,async_insert=1' }, {}).storage
      .clickhouseInsertSettings,
    { insert_quorum: 2, insert_quorum_parallel: 0, async_insert: 1 },
  )
  t.same(
    loadConfig({}, { WEFT_STORAGE: 'clickhouse', WEFT_CLICKHOUSE_INSERT_SETTINGS: 'insert_quorum=auto' }).storage.clickhouseInsertSettings,
    { insert_quorum: 'auto' },
    'from the environment; a word stays a string',
  )
  for (const bad of ['insert_quorum', 'x=1;DROP TABLE t', "a='b'", 'Insert_Quorum=1', 'a=1,a=2', 'a=', '=1'])
    t.throws(() => loadConfig({ storage: 'chdb', 'clickhouse-insert-settings': bad }, {}), /clickhouse-insert-settings/, bad)
  t.throws(() => loadConfig({ 'clickhouse-insert-settings': 'async_insert=1' }, {}), /needs --storage clickhouse or chdb/)
})
