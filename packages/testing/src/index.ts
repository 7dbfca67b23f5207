// @genservice/testing: the shared suites every adapter, store, ledger and queue runs.
export * from './contracts/index.js';
export * from './conformance/index.js';
export * from './fakes.js';
export * from './clock.js';
export { until, type UntilOptions } from './until.js';
export { createTestService, type TestService, type TestServiceOptions } from './service.js';
export * from './scale-out/index.js';
export { createFakeUpstream, createUpstreamProvider, stepClockUntil, type FakeUpstream, type FakeUpstreamOptions } from './upstream.js';
