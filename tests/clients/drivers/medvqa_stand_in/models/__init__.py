AVAILABLE_MODELS = {"medvqa_stand_in": "StandIn"}
