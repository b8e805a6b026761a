"""What an agent reads (DESIGN §8, CiK §3): the plain-language case context (:mod:`fwgym.context.text`) and the
CiK-style scenarios that change the target and say so in a note (:mod:`fwgym.context.scenarios`).
"""
