// The command line as a person meets it: the commands the service prints, and the CLI's help.
import { describe, expect, it } from 'vitest';
import { cliCommand, localBaseUrl } from '../../src/cli-command.js';

describe('printed commands', () => {
  it('name the CLI as it runs where the service runs: plain node in a compiled install (the image has no tsx), npm run in a checkout', () => {
    expect(cliCommand('file:///app/dist/cli-command.js')).toBe('node dist/cli.js');
    expect(cliCommand('file:///home/me/cns/src/cli-command.ts')).toBe('npm run cli --');
    // this test runs the sources
    expect(cliCommand()).toBe('npm run cli --');
  });

  it('reach a server listening on every interface through the loopback address', () => {
    expect(localBaseUrl('0.0.0.0', 8080)).toBe('http://127.0.0.1:8080');
    expect(localBaseUrl('::', 3000)).toBe('http://127.0.0.1:3000');
    expect(localBaseUrl('::1', 3000)).toBe('http://[::1]:3000');
    expect(localBaseUrl('10.1.2.3', 3000)).toBe('http://10.1.2.3:3000');
  });
});
