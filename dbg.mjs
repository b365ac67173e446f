import { openAnalytics } from './dist/src/index.js'
const a = await openAnalytics(process.argv[2], { flushIntervalMs: 0 })
await a.ready()
try { console.log(JSON.stringify(await a.usage.calls('e/p', ['01900000-0000-7000-8000-000000000000'], true, 100))) } catch (e) { console.log(e) }
await a.close()
