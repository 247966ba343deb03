"""Topics without a model: :mod:`.cluster` groups message vectors and names the groups with
:mod:`.text`'s key phrases; :mod:`.talk` spots small talk and standing instructions."""
