-- Argo CD health check for stable.example.com/MachineModel. Install it in argocd-cm as
-- resource.customizations.health.stable.example.com_MachineModel (see README.md beside it).
-- Reads the conditions the operator writes: Stalled=True needs a person (Degraded), Ready=True is
-- Healthy, anything else (a rollout, a deletion, no status yet) is Progressing.
local hs = { status = "Progressing", message = "waiting for the operator" }
if obj.status == nil then
  return hs
end
local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < generation) then
  hs.message = "waiting for the operator to observe generation " .. generation
  return hs
end
local conditions = obj.status.conditions or {}
for _, c in ipairs(conditions) do
  if c.type == "Stalled" and c.status == "True" then
    hs.status = "Degraded"
    hs.message = c.reason .. ": " .. c.message
    return hs
  end
end
for _, c in ipairs(conditions) do
  if c.type == "Ready" then
    if c.status == "True" then
      hs.status = "Healthy"
    end
    hs.message = c.message
    return hs
  end
end
return hs
