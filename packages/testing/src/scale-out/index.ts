export { HostProcess, createOn, type CreateAnswer, type HostSpawn } from './host-process.js';
export { runScaleOutSuite, type ScaleOutCluster, type ScaleOutOptions, type ScaleOutStores } from './suite.js';
export { runCancelAcrossInstances, type CancelSetup } from './cancel.js';
