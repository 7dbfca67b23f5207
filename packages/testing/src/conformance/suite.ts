/**
 * The conformance suite of one mount mode, area by area. Each area is a file of its own; this keeps their order (the
 * order the report lists them in) and hands each the mode's shared fixture.
 */
import { defineBatchTests } from './batches.js';
import { defineCancelTests, defineDeleteTests, defineExpiryTests } from './cancel-delete.js';
import { defineBodyLimitTests, defineCreateTests, defineValidationTests } from './create.js';
import { defineHeaderTests, defineHostileTests, definePlaygroundTests } from './http-edges.js';
import { useFixture, type ModeContext } from './kit.js';
import { defineConsoleTests } from './operations.js';
import { defineListTests } from './list.js';
import { defineOrganizationTests } from './organizations.js';
import { defineUserLimitTests } from './user-limits.js';
import { defineLiveStatusTests, defineStreamCapTests } from './live.js';
import { defineBillingTests, defineLifecycleTests } from './load.js';
import { defineFileTests, defineGetTests, defineOwnershipTests } from './reads.js';
import { defineAuthenticationTests, defineRepeatedAuthorizationTests, defineRoutingTests } from './routing.js';
import { defineUploadTests } from './uploads.js';
import type { MountFn, MountOptions } from './types.js';
import { defineWebhookEndpointTests } from './webhook-endpoints.js';

export function defineModeTests(mount: MountFn, mode: MountOptions, options: { heavy: boolean }): void {
  const ctx: ModeContext = { fx: useFixture(mount, mode), mount, mode, heavy: options.heavy };
  defineRoutingTests(ctx);
  defineAuthenticationTests(ctx);
  defineCreateTests(ctx);
  defineValidationTests(ctx);
  defineBodyLimitTests(ctx);
  defineGetTests(ctx);
  defineFileTests(ctx);
  defineUploadTests(ctx);
  defineOwnershipTests(ctx);
  defineCancelTests(ctx);
  defineExpiryTests(ctx);
  defineDeleteTests(ctx);
  defineListTests(ctx);
  defineHeaderTests(ctx);
  defineLiveStatusTests(ctx);
  defineHostileTests(ctx);
  defineStreamCapTests(ctx);
  definePlaygroundTests(ctx);
  defineConsoleTests(ctx);
  defineRepeatedAuthorizationTests(ctx);
  defineBatchTests(() => ctx.fx);
  defineWebhookEndpointTests(ctx);
  defineBillingTests(ctx);
  defineOrganizationTests(ctx);
  defineUserLimitTests(ctx);
  defineLifecycleTests(ctx);
}
