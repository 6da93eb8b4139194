"""Publishing a release folder to the Hub (`publish`): check the repo id, validate, plan against the Hub, one commit
and a tag (to_hub.py), and Hub failures as one line that says what to do (hub_errors.py)."""
