/**
 * A house rule (docs/architecture.md): the tests type-check (tsconfig.test.json). They run transpiled, types
 * stripped (scripts/build-tests.ts), so nothing else would see a test that calls an API that no longer exists.
 * Its own file, apart from test/house, so that each stays well inside tap's 240 s limit on a loaded machine.
 */
import t from 'tap'
import { toolFailure } from './helpers/house-tool.js'

t.test('the tests type-check (tsc -p tsconfig.test.json)', async (t) => {
  t.equal(toolFailure('tsc', ['-p', 'tsconfig.test.json']), '', 'no type error in src, workers or test')
})
