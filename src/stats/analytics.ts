import { Catalog } from '../catalog/db.js'
import { Prices, defaultPrices } from '../catalog/prices.js'
import { CallStore, type StoreOptions } from '../calls/store.js'
import { CallStats } from './engine.js'
import { Rollups } from './rollups.js'
import { UsageRollup } from './usage.js'

/** The statistics side of a calls store: rollups kept current, stats, usage and prices over it. */
export interface Analytics {
  store: CallStore
  prices: Prices
  rollups: Rollups
  stats: CallStats
  usage: UsageRollup
}

/** Builds the statistics over an open store and catalog; the rollups build in the background. */
export async function attachAnalytics(store: CallStore, catalog: Catalog, extraPrices = ''): Promise<Analytics> {
  const prices = new Prices(catalog, defaultPrices(extraPrices))
  const rollups = new Rollups(store)
  await rollups.start()
  return { store, prices, rollups, stats: new CallStats(store, rollups, prices), usage: new UsageRollup(store, prices, rollups) }
}

/**
 * Opens a data directory for in-process analytics, without HTTP: the calls store, its statistics,
 * usage rollups and prices. `ready` resolves once the rollups are built (statistics scan before).
 */
export async function openAnalytics(
  dataDir: string,
  options: StoreOptions & { prices?: string } = {},
): Promise<Analytics & { ready: () => Promise<void>; close: () => Promise<void> }> {
  const catalog = await Catalog.open(dataDir)
  const store = await CallStore.open(dataDir, options)
  const a = await attachAnalytics(store, catalog, options.prices)
  return {
    ...a,
    ready: () => store.exclusive(async () => {}),
    async close() {
      a.rollups.interrupt()
      await store.exclusive(async () => a.rollups.close())
      await store.close()
      await catalog.close()
    },
  }
}
