-- wrk on one connection: each request goes to the other servlet than the one before it, so both
-- get as many requests (one more at most).
local n = 0
request = function()
  n = n + 1
  if n % 2 == 0 then
    return wrk.format("GET", "/energy/heavy")
  end
  return wrk.format("GET", "/energy/light")
end
