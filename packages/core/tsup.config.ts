import { defineConfig } from 'tsup';

const entry = ['src/index.ts', 'src/ports.ts', 'src/adapter.ts'];

/**
 * ESM-only dependencies (p-queue and what it imports): bundled into the CommonJS build, so `require('@genservice/core')`
 * works on every Node 20 (`require` of an ES module needs Node 20.19). The ESM build imports them as dependencies.
 * scripts/check-packages.mjs runs the CommonJS entry with `--no-experimental-require-module` to keep it so.
 */
const ESM_ONLY = ['p-queue', 'p-timeout', 'eventemitter3'];

// `pnpm build` empties dist/ first (the two builds run at once, so neither may clean).
export default defineConfig([
  { entry, format: 'esm', dts: true, target: 'node20' },
  { entry, format: 'cjs', dts: true, target: 'node20', noExternal: ESM_ONLY },
]);
