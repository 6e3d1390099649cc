"""The unified policy spanning the four families (:mod:`.policy`) and its round kernel
(:mod:`.kernel`)."""
