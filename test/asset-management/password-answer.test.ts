// A station's answer to the password command switches the password only when it accepts exactly
// that: every SetVariables result Accepted for SecurityCtrlr / BasicAuthPassword.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { answerOutcome } from '../../src/asset-management/rotation.js';
import type { OcppSubprotocol } from '../../src/kernel/ocpp-vocabulary.js';
import { codecOf } from '../../src/stations/ocpp/ocpp-codec.js';
import { ASSET_WRITER, familyError } from '../helpers/asset-factory.js';
import { provisionStation, stationClient, useStationApp, type ProvisionedStation } from '../helpers/station-factory.js';

// The station's answer as its version's codec reads it.
const passwordCommandStatus = (protocol: OcppSubprotocol, answer: unknown) => codecOf(protocol)!.readPasswordAnswer(answer);
const outcomeOf = (protocol: OcppSubprotocol, answer: unknown) => answerOutcome({ kind: 'status', status: passwordCommandStatus(protocol, answer) });

const PASSWORD_RESULT = { component: { name: 'SecurityCtrlr' }, variable: { name: 'BasicAuthPassword' } };

describe('the password answer, as each codec reads it', () => {
  const status = fc.oneof(
    fc.constantFrom('Accepted', 'Rejected', 'UnknownComponent', 'UnknownVariable', 'NotSupportedAttributeType', 'RebootRequired'),
    fc.string({ maxLength: 12 }),
  );
  const result = fc.record(
    {
      attributeStatus: status,
      component: fc.record({ name: fc.constantFrom('SecurityCtrlr', 'OCPPCommCtrlr', 'securityctrlr', '') }, { requiredKeys: [] }),
      variable: fc.record({ name: fc.constantFrom('BasicAuthPassword', 'BasicAuthPassword2', 'Identity') }, { requiredKeys: [] }),
      attributeType: fc.constantFrom('Actual', 'Target', 'MinSet', 'MaxSet'),
    },
    { requiredKeys: ['attributeStatus'] },
  );
  // Half the results accept the password itself, so lists of them only are common.
  const accepting = fc.constant({ attributeStatus: 'Accepted', ...PASSWORD_RESULT });
  const results = fc.array(fc.oneof(accepting, result), { maxLength: 4 });

  const forPassword = (r: { component?: { name?: string }; variable?: { name?: string }; attributeType?: string }) =>
    r.component?.name === 'SecurityCtrlr' && r.variable?.name === 'BasicAuthPassword' && (r.attributeType ?? 'Actual') === 'Actual';

  it('property (2.0.1): accepted exactly when the list is not empty and every result is Accepted for SecurityCtrlr / BasicAuthPassword', () => {
    fc.assert(
      fc.property(results, (list) => {
        const accepted = list.length > 0 && list.every((r) => r.attributeStatus === 'Accepted' && forPassword(r));
        expect(outcomeOf('ocpp2.0.1', { setVariableResult: list }) === 'ACCEPTED').toBe(accepted);
      }),
      { numRuns: 2000 },
    );
  });

  it('property (2.0.1): unconfirmed only when every result is for the password and one says RebootRequired while none refuses', () => {
    fc.assert(
      fc.property(results, (list) => {
        const unconfirmed =
          list.length > 0 &&
          list.every((r) => forPassword(r) && (r.attributeStatus === 'Accepted' || r.attributeStatus === 'RebootRequired')) &&
          list.some((r) => r.attributeStatus === 'RebootRequired');
        expect(outcomeOf('ocpp2.0.1', { setVariableResult: list }) === 'UNCONFIRMED').toBe(unconfirmed);
      }),
      { numRuns: 2000 },
    );
  });

  it('property (1.6): accepted exactly when the status is Accepted', () => {
    fc.assert(fc.property(status, (s) => (outcomeOf('ocpp1.6', { status: s }) === 'ACCEPTED') === (s === 'Accepted')));
  });

  it.each([null, undefined, {}, { setVariableResult: [] }, { setVariableResult: 'Accepted' }, { setVariableResult: [null] }, { status: 'Accepted' }])(
    '2.0.1 %j is no acceptance',
    (answer) => {
      expect(outcomeOf('ocpp2.0.1', answer)).toBe('REJECTED');
    },
  );

  it('names what the station answered for another variable', () => {
    expect(passwordCommandStatus('ocpp2.0.1', { setVariableResult: [{ attributeStatus: 'Accepted', component: { name: 'OCPPCommCtrlr' }, variable: { name: 'Identity' } }] })).toBe(
      'Accepted for OCPPCommCtrlr/Identity',
    );
  });
});

describe('through change-password, with a 2.0.1 station', () => {
  const t = useStationApp();

  async function stationAnswering(results: () => unknown[]): Promise<ProvisionedStation> {
    const s = await provisionStation(t, { ocppVersion: '2.0.1' });
    const client = stationClient(t.endpoint, { identity: s.id, password: s.password, protocols: ['ocpp2.0.1'] });
    t.open.push(client);
    await client.connect();
    client.handle('SetVariables', async () => ({ setVariableResult: results() }));
    return s;
  }

  async function canLogIn(id: string, password: string): Promise<boolean> {
    const client = stationClient(t.endpoint, { identity: id, password, protocols: ['ocpp2.0.1'] });
    t.open.push(client);
    try {
      await client.connect();
      return true;
    } catch {
      return false;
    }
  }

  it.each([
    ['Accepted and Rejected for the password', () => [{ attributeStatus: 'Accepted', ...PASSWORD_RESULT }, { attributeStatus: 'Rejected', ...PASSWORD_RESULT }], 'answered Rejected'],
    ['Accepted for another variable', () => [{ attributeStatus: 'Accepted', component: { name: 'OCPPCommCtrlr' }, variable: { name: 'Identity' } }], 'Accepted for OCPPCommCtrlr/Identity'],
    [
      'Accepted for the password and for another variable',
      () => [{ attributeStatus: 'Accepted', ...PASSWORD_RESULT }, { attributeStatus: 'Accepted', component: { name: 'SecurityCtrlr' }, variable: { name: 'Identity' } }],
      'Accepted for SecurityCtrlr/Identity',
    ],
    ['Accepted for the password’s Target attribute', () => [{ attributeStatus: 'Accepted', attributeType: 'Target', ...PASSWORD_RESULT }], 'Accepted for SecurityCtrlr/BasicAuthPassword (Target)'],
  ])('%s: 409 STATION_REJECTED naming it; the old password keeps working, the new one never does', async (_name, results, named) => {
    const s = await stationAnswering(results);
    const password = `Supplied:${Date.now().toString(36)}-answers`;
    const res = await t.app.inject({ method: 'POST', url: '/asset-management/v1/assets/change-password', headers: { authorization: t.bearer(ASSET_WRITER) }, payload: { id: s.id, password } });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toEqual(familyError('CONFLICT', 'STATION_REJECTED'));
    expect(res.json().message).toContain(named);
    expect(await canLogIn(s.id, password)).toBe(false);
    expect(await canLogIn(s.id, s.password)).toBe(true);
  });
});
