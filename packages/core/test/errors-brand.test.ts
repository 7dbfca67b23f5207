import { describe, expect, it } from 'vitest';
import { ProviderError, UnavailableError } from '@genservice/core';
import { ProviderError as PortsProviderError, UnavailableError as PortsUnavailableError } from '@genservice/core/ports';

/** What the other CommonJS copy of the class makes: an Error with the same brand, not made by this class. */
function foreign(brand: string, name: string): Error {
  const e = new Error('from the other copy');
  Object.defineProperty(e, Symbol.for(brand), { value: true });
  e.name = name;
  return e;
}

describe('port errors across copies of core (the CJS builds of @genservice/core and /ports each hold one)', () => {
  it('the same classes from both entries', () => {
    expect(PortsProviderError).toBe(ProviderError);
    expect(PortsUnavailableError).toBe(UnavailableError);
  });

  it("recognises the other copy's UnavailableError and ProviderError by their brand", () => {
    expect(foreign('@genservice/core:UnavailableError', 'UnavailableError')).toBeInstanceOf(UnavailableError);
    expect(foreign('@genservice/core:ProviderError', 'ProviderError')).toBeInstanceOf(ProviderError);
    expect(new Error('plain')).not.toBeInstanceOf(UnavailableError);
    expect(foreign('@genservice/core:ProviderError', 'ProviderError')).not.toBeInstanceOf(UnavailableError);
    expect(new UnavailableError('x')).toBeInstanceOf(UnavailableError);
    expect(new UnavailableError('x')).toBeInstanceOf(Error);
  });

  it('a subclass keeps plain instanceof: a ProviderError is not every subclass of it', () => {
    class Special extends ProviderError {}
    expect(new Special('s')).toBeInstanceOf(ProviderError);
    expect(new Special('s')).toBeInstanceOf(Special);
    expect(new ProviderError('p')).not.toBeInstanceOf(Special);
    expect(foreign('@genservice/core:ProviderError', 'ProviderError')).not.toBeInstanceOf(Special);
  });
});
