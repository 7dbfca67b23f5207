import { telemetryBench } from './sections/telemetry.js';
const r = await telemetryBench({ rounds: 5, gets: 100_000, posts: 20_000 });
console.log(JSON.stringify(r));
