"""Models from files: MJCF and URDF through MuJoCo's own parser (:mod:`.mjcf`)."""
