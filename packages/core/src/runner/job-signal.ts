/**
 * The controllers behind the signals the in-process queue hands its handler. The runner needs a controller of its own
 * for every run (timeout, lost lease) that also follows the queue's signal; when the queue's controller is known it
 * aborts that one instead of making and linking a second (an AbortController costs microseconds to create on Node 20,
 * twice per generation otherwise). Internal to core: not exported from any entry point.
 */
const CONTROLLER = Symbol('genservice.jobController');

type Marked = AbortSignal & { [CONTROLLER]?: AbortController };

/** A new controller whose signal the runner may abort through `controllerOf`. */
export function jobController(): AbortController {
  const controller = new AbortController();
  // A property under a private symbol, not a WeakMap entry: no ephemeron for the garbage collector per job.
  (controller.signal as Marked)[CONTROLLER] = controller;
  return controller;
}

/** The controller of a signal made by `jobController`, or undefined for any other signal. */
export function controllerOf(signal: AbortSignal): AbortController | undefined {
  return (signal as Marked)[CONTROLLER];
}
