import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/test-app.js';
import { MODEL_ADMIN, createModel, modelBody, uniqueNetwork } from '../helpers/asset-factory.js';

const URL_ = '/asset-management/v1/charging-station-models';

const t = useTestApp();

// The model catalogue is shared by every network: an admin of one network must not change it.
describe('charging station model catalogue: admins without a network claim only', () => {
  const networkAdmin = () => t.bearer({ ...MODEL_ADMIN, network: uniqueNetwork() });

  it('403 { message } for a network-scoped admin creating a model, before validation; 201 for an admin without one', async () => {
    const body = modelBody();
    for (const payload of [body, { nonsense: true }]) {
      const res = await t.app.inject({ method: 'POST', url: URL_, headers: { authorization: networkAdmin() }, payload });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toEqual({ message: expect.any(String) });
    }
    // nothing was stored: the same vendor and model are still free
    const created = await t.app.inject({ method: 'POST', url: URL_, headers: { authorization: t.bearer(MODEL_ADMIN) }, payload: body });
    expect(created.statusCode, created.body).toBe(201);
  });

  it('403 { message } for a network-scoped admin archiving a model; 200 for an admin without one', async () => {
    const model = await createModel(t);
    const url = `${URL_}/${model.id}/archive`;
    const res = await t.app.inject({ method: 'POST', url, headers: { authorization: networkAdmin() } });
    expect(res.statusCode, res.body).toBe(403);
    expect(res.json()).toEqual({ message: expect.any(String) });
    // still unarchived, and still readable by a network-scoped reader
    const read = await t.app.inject({
      url: `${URL_}/${model.id}`,
      headers: { authorization: t.bearer({ scopes: ['read:chargingstationmodel'], network: uniqueNetwork() }) },
    });
    expect(read.statusCode).toBe(200);
    expect(read.json().data.isArchived).toBe(false);

    const archived = await t.app.inject({ method: 'POST', url, headers: { authorization: t.bearer(MODEL_ADMIN) } });
    expect(archived.statusCode, archived.body).toBe(200);
    expect(archived.json().data.isArchived).toBe(true);
  });
});
