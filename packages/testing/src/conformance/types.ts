import type { GenerationService } from '@genservice/core';

/** How the suite asks an adapter to be mounted. */
export interface MountOptions {
  /** Mount point: `''` (the root) or a path such as `/api`. */
  prefix: string;
  /**
   * Install the framework's usual JSON/form body parsers in the host app, the way the adapter's docs say to
   * combine them (e.g. `express.json()` before the router; `@koa/bodyparser` after the middleware).
   */
  hostParsers: boolean;
}

export interface MountedServer {
  /** `http://127.0.0.1:<port>` plus the prefix: the API's `{base_url}`. */
  baseUrl: string;
  close(): Promise<void>;
}

/** Mounts `service` in a fresh app of the adapter's framework and starts a real listening server. */
export type MountFn = (service: GenerationService, options: MountOptions) => Promise<MountedServer>;
