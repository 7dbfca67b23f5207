import type { GenerationService } from '@genservice/core';

/**
 * `count` creates through `service.handle`, ten at a time (as the HTTP section's load keeps ten connections busy): what
 * the in-process scripts (create-profile.ts, instructions.ts) drive. Throws on any answer but 201.
 */
export async function postTenAtATime(service: Pick<GenerationService, 'handle'>, req: Parameters<GenerationService['handle']>[0], count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < count) {
        next++;
        const r = await service.handle(req);
        if (r.status !== 201) throw new Error(`POST answered ${r.status}`);
      }
    }),
  );
}
